"""alloclab: measure how memory allocators change the performance of database engines."""

__version__ = "0.2.0"
