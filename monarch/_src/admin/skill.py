"""The text of `GET /SKILL.md`: how to walk the mesh admin API, for people and agents.

Kept as a string in a module (not a data file) so it ships with any install of the package;
`{base}` is replaced by the admin URL of the server that serves it.
"""

__all__ = ["SKILL_MD"]

SKILL_MD = """\
# Monarch mesh admin API

Base URL: `{base}`

The base URL carries this client's admin token as its first path segment: keep it private, as
you would a password. Every route below is relative to it (`curl {base}/v1/root`). You may
also send the token in a header instead, with paths from `/`:
`curl -H 'Authorization: Bearer <token>' http://host:port/v1/root`. A request without the
token is answered 401. When the client runs with TLS (`enable_tls`), the server speaks mutual
TLS: pass the client certificate, key and CA of the job's configuration to curl
(`--cert`, `--key`, `--cacert`).

## Walking the mesh

1. `GET {base}/v1/root`: the root node. Its `children` are host references.
2. `GET {base}/v1/<reference>` with the reference URL-encoded (`urllib.parse.quote(ref,
   safe="")`): a host's children are procs, a proc's children are actors.
3. `GET {base}/v1/tree`: the whole tree as text, one line per node with its URL.

Every node answers the same shape:

```json
{{"identity": "<reference>", "properties": {{"Root" | "Host" | "Proc" | "Actor": {{...}}}},
 "children": ["<reference>", ...], "parent": "<reference>" | null, "as_of": "<ISO 8601>"}}
```

References: `root`; `host:<host name>`; `<proc id>@<address>` for a proc (the client process
is one too); `<actor mesh key>[<rank>].<proc reference>` for an actor.

What to look at:

* `Proc`: `is_poisoned` (an actor on it failed), `failed_actor_count`, `stopped_children`
  (references of its failed or stopped actors), `state` (`running`, `failed`, `stopped`,
  `starting`), `pid`, `reachable` (the proc answered the admin), `debug.memory`.
* `Actor`: `actor_status` (`idle`, `processing`, or `failed: <report>` / `stopped: <reason>`),
  `failure_info` (`error_message`, `root_cause_actor`, `occurred_at`, `is_propagated`) on a
  failed actor, `execution.active_handlers` (each endpoint running now and since when),
  `in_flight` (the same, each call with its age in seconds), `queue_depth`.

## Diagnosing

* `GET {base}/v1/health`: a probe of every node: `{{"healthy", "counts", "checks": [{{"ref",
  "kind", "status": "pass" | "slow" | "fail", "latency_ms", "detail"}}]}}`.
* `GET {base}/v1/why`: hang triage. Every rank's Python stack and calls in flight, ranks with
  the same stack grouped, and the outliers named: `{{"summary": "3 ranks of trainer in
  all_reduce; rank 2 of trainer in load_batch for 212 s", "groups": [...], ...}}`. Start here
  when a job hangs.
* `GET {base}/v1/stacks/<proc or actor reference>`: every thread's Python stack in that proc
  (actor threads labelled) and py-spy's dump when py-spy may attach.
* `GET {base}/v1/pyspy/<proc reference>`: py-spy's structured dump: `{{"Ok": {{"stack_traces":
  ...}}}}`, `{{"BinaryNotFound": ...}}` (install py-spy, or set the `pyspy_bin` config key) or
  `{{"Failed": ...}}`.
* `GET {base}/v1/snapshot`: the table `monarch top` draws (hosts, procs, actors, message
  counts, failures).
* `GET {base}/v1/admin`: which process serves this API.
* `POST {base}/v1/query` with `{{"sql": "..."}}`: SQL over the telemetry tables when telemetry
  is enabled; 404 otherwise.

## Errors

Errors are JSON: `{{"error": {{"code": "...", "message": "..."}}}}`. Codes: `not_found` (no such
node or route), `bad_request`, `unauthorized` (no token), `gateway_timeout` (a proc did not
answer in time: it may be hung; `/v1/why` still reports what it can), `internal_error`.
"""
