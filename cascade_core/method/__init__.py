"""The method as the paper states it: the rules and the distributions they read, sampling and
verification, one row's decision on its block, the cost model and the explanations. It imports nothing of cascade_core
but its own modules and cascade_core.messages (tests/test_structure.py): a reader of the paper reads this folder, and
cascade_core/reference.py, the same method as one naive loop."""
