"""The tool's version, in a leaf module: a module of the tool that imported the ``audit``
package for it would depend on everything the package loads on demand (the Python API,
audit/api.py), and so would close an import cycle."""

__version__ = "0.1.0"
