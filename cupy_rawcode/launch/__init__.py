"""Stage 6, the launch: takes a kernel's source and its call arguments and gives the typed
argument tuple (signature.py reads each entry point's parameters, bind.py binds to them)."""
