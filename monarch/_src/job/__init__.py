"""Jobs: declarative specs of host meshes that a scheduler brings up (`monarch.job`)."""
