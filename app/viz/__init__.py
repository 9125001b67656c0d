"""Traces into HTML and plotly figures; no cascade math lives here."""
import plotly.io as pio

# Set once for every figure of the app: the process-wide default costs a fraction of template= per figure
# (~20 ms per figure, most of an alpha drag's or a sandbox slider's budget).
pio.templates.default = "plotly_white"
