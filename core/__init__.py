"""The ground floor: errors, paths, result files and registries.

Every other package may import ``core``; ``core`` imports nothing of the project.
"""
