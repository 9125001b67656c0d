"""The models as files: a pair, the shipped draft, the EAGLE-3 head, weight precision, loading pairs
and whether the Hub can be reached."""
