# tests/support/simcuda: the simulated CUDA driver
# (build/tests/simcuda/libcuda.so.1) and a miniature runtime over it, reached
# two ways: libsimrt.so (dlopen + cuGetProcAddress_v2, like libcudart) and
# libsimrt_direct.so (linked to libcuda.so.1, PLT calls).  Included by
# tests/tests.mk.

SIMCUDA_T := $(BUILD)/tests/simcuda
SIMCUDA_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -O2 -g -fPIC -fvisibility=hidden \
	-I$(CUDA_HOME)/include

tests-aux:: $(SIMCUDA_T)/libcuda.so.1 $(SIMCUDA_T)/libsimrt.so $(SIMCUDA_T)/libsimrt_direct.so

# -Bsymbolic-functions like the real driver: the pointers it hands out are
# its own functions even when a preload exports the same cu* names.
$(SIMCUDA_T)/libcuda.so.1: tests/support/simcuda/simcuda.c
	@mkdir -p $(dir $@)
	$(CC) $(SIMCUDA_CFLAGS) -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic-functions \
		-Wl,--no-undefined -o $@ $< -lpthread
	ln -sf libcuda.so.1 $(SIMCUDA_T)/libcuda.so

$(SIMCUDA_T)/libsimrt.so: tests/support/simcuda/cudart_like.c
	@mkdir -p $(dir $@)
	$(CC) $(SIMCUDA_CFLAGS) -shared -Wl,--no-undefined -o $@ $< -ldl

$(SIMCUDA_T)/libsimrt_direct.so: tests/support/simcuda/cudart_like.c $(SIMCUDA_T)/libcuda.so.1
	$(CC) $(SIMCUDA_CFLAGS) -DSIMRT_DIRECT -shared -Wl,--no-undefined -o $@ $< \
		-L$(SIMCUDA_T) -l:libcuda.so.1 -Wl,-rpath,'$$ORIGIN'
