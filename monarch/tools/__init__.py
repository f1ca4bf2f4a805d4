"""monarch.tools: the `monarch` command line (`monarch.tools.cli:main`)."""
