"""Stage 6, the launch: takes a kernel's source and its call arguments and gives the typed
argument tuple (lexer.py reads the tokens and macros, signature.py each entry point's
parameters, bind.py binds to them)."""
