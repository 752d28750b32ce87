"""alloc"""
