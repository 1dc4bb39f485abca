"""Start Arize Phoenix on 127.0.0.1 with its gRPC receiver disabled (it would bind every interface).

Run as ``python phoenix_server.py``; configuration comes from the ``PHOENIX_*`` environment
variables the test sets (host, port, working directory, telemetry off).
"""

from __future__ import annotations

import sys
from typing import Any

from phoenix.server import grpc_server
from phoenix.server.main import main

_init = grpc_server.GrpcServer.__init__


def _init_disabled(self: Any, *args: Any, **kwargs: Any) -> None:
    kwargs["disabled"] = True  # OTLP/gRPC listens on [::]; the test uses OTLP/HTTP on loopback only
    _init(self, *args, **kwargs)


grpc_server.GrpcServer.__init__ = _init_disabled  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.argv = ["phoenix", "serve"]
    main()
