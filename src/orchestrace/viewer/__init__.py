"""See a trace: a self-contained HTML viewer (timeline, DAG, critical path, untrusted flows) and
HTML/PNG reports of analysis and training runs."""

from .html import embed_json, render_html, render_payload, write_html
from .payload import build_payload, lane_order

__all__ = ["build_payload", "embed_json", "lane_order", "render_html", "render_payload", "write_html"]
