"""The command line: a thin layer over the engine and the analyses, one module per command group."""
