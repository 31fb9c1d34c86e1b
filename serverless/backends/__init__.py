"""Function backends: local Lambda emulator, Ray tasks, AWS Lambda.

All implement :class:`serverless.backends.base.FunctionBackend`.
"""
