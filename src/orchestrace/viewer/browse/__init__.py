"""The trace browser (``orchestrace ui``): a local web app over a store and training runs."""

from .data import COLUMNS, open_store
from .runs import read_run
from .server import App, make_app_server, serve_in_thread

__all__ = ["COLUMNS", "App", "make_app_server", "open_store", "read_run", "serve_in_thread"]
