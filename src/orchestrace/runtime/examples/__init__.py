"""Runnable example systems: each ``build(config)`` returns a ``Setup`` the runner executes.

- ``centralized``: an orchestrator fans sub-tasks out to parallel workers and joins the answers.
- ``pec``: planner -> executor (with a calculator tool) -> critic, looping until the critic accepts.
- ``debate``: debaters answer, read each other's answers, and answer again; majority vote decides.
- ``vote``: self-consistency in parallel waves, asking the stop decision after every finished worker.
- ``route``: one question routed to one of several models (the delegate decision).
- ``swarm``: a staged task, the spawn width of each stage a decision.

Programs of the packages above the runtime are not named here: they register under the
``orchestrace.programs`` entry-point group (pyproject.toml), as learn's ``team`` does (k solvers
answer a bank question, an aggregator reads their answers), and ``runner.load_program`` finds them.
"""

EXAMPLES = {
    "centralized": "orchestrace.runtime.examples.centralized:build",
    "pec": "orchestrace.runtime.examples.pec:build",
    "debate": "orchestrace.runtime.examples.debate:build",
    "vote": "orchestrace.runtime.examples.vote:build",
    "route": "orchestrace.runtime.examples.route:build",
    "swarm": "orchestrace.runtime.examples.swarm:build",
}
