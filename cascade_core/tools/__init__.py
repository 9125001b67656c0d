"""The command line and the Hub export. Nothing in cascade_core imports a tool but __main__.py."""
