"""The GPU engine. Importing this package imports no pycuda; device.probe() says whether a GPU is
usable and, if not, why."""
