"""What a record says of the machine and software it was measured on: its capture (``capture``) and the installed
versions of the project's dependency closure (``packages``). Below the records; no torch at import."""
