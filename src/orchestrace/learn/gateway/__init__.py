"""The gateway: any team, written with any agent framework, recorded and trained through an
OpenAI-compatible HTTP endpoint (docs/gateway.md). ``protocol``: the wire format; ``completers``:
what answers a call; ``runs``: the recording; ``service``: runs and calls on one event loop;
``server``: HTTP."""
