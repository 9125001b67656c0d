"""What makes the engine faster without changing a token: measured prices, the CPU's product kernels,
the compiled static-cache path. Nothing here imports the method (tests/test_structure.py)."""
