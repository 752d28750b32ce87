"""alloclab: measure how memory allocators change the performance of database engines."""

__version__ = "0.1.0"
