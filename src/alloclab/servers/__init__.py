"""Database servers alloclab starts and owns: a running server (server), the studies' stack at run
time (root) and its setup (stack, from sources), and the correctness probes run before a target's
data is loaded (correctness).
"""
