"""The weir command line: the only layer that prints, reads the terminal or exits."""
