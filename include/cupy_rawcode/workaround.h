// cupy-rawcode: pre-included into every compile. Keep it tiny: it must not pull in CCCL.
#pragma once
#ifndef CUPY_RAWCODE_WORKAROUND_H
#define CUPY_RAWCODE_WORKAROUND_H
#define CUPY_RAWCODE 1
#endif
