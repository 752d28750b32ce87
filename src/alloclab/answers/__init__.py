"""Answers from stored rows alone: statistics (stats), the one metric registry (metrics), verdicts
and the one comparison rule (decide), replication across studies and machines (replicate), the
study's analyses (analyse) and its answers in words (sentences). Never imports what runs.
"""
