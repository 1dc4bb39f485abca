from __future__ import annotations

import datakit

data = datakit.data  # the shared fixture, offered to the tests here
