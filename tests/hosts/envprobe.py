"""Imported by the zygote as a preloaded module in test_preload_env: records, at import, the
value its environment had then."""

import os

SEEN = os.environ.get("MONARCH_TEST_ENVPROBE")
