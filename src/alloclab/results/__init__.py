"""A study's folder (store): plan.json, machine.json, runs.csv appended as runs finish, a folder
per run, MANIFEST.sha256; one versioned row format whose older versions still load.
"""
