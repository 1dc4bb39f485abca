"""Deprecated (28 Nov 2026): the runtime's programs are ``orchestrace.runtime.programs``
(``PROGRAMS``, ``Setup``); ``examples.common`` still re-exports ``Setup`` and the antonym prompt."""
