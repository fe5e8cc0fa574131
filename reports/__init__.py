"""The application: the built-in study, rendering and the `tide` command line."""
