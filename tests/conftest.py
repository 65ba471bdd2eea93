"""Shared by the whole suite: this folder is on sys.path, so tests import `jobs`."""
