"""Traces into HTML and plotly figures; no cascade math lives here."""
