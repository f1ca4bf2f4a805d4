"""The admin view of a running mesh: a live model of hosts, procs and actors, stack dumps on
demand, and the control server that the `monarch debug`/`stacks`/`top` commands talk to.

`model.py` builds snapshots from the root client's runtime state; `stacks.py` answers stack
dump requests in every process; `server.py` serves debug sessions and admin queries from the
root client; `client.py` is the stdlib-only other end used by the CLI; `tui.py` draws `monarch
top` in a terminal.
"""
