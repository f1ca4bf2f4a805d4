"""monarch.experimental: utilities whose interface may still change (`thread_timeout`)."""
