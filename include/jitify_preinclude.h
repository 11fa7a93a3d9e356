// cupy-rawcode: what Jitify pre-included into every jitify=True compile (CuPy's Jitify passed
// --pre-include=jitify_preinclude.h), for jitify=True here too (cupy_rawcode/jitify_compat.py):
// explicitly host functions compile as device code, try/catch parse, and Thrust's static
// assertions are skipped.
#pragma once
#ifdef __host__
#undef __host__
#endif
#define __host__
#define try
#define catch(...)
#define THRUST_STATIC_ASSERT(x)
