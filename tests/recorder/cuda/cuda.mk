# tests/recorder/cuda: C programs for the CUDA interception tests
# (test_cuda.py) and the launch-cost benchmark, built into build/tests/cuda/.
# Included by tests/tests.mk.

CUDA_T := $(BUILD)/tests/cuda
CUDA_TEST_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -O2 -g -I$(CUDA_HOME)/include

tests-aux:: $(CUDA_T)/cuda_app $(CUDA_T)/dlsym_app $(CUDA_T)/launchbench

$(CUDA_T)/cuda_app: tests/recorder/cuda/cuda_app.c
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_TEST_CFLAGS) -o $@ $< -ldl -lpthread

$(CUDA_T)/libnext_a.so: tests/recorder/cuda/nextlib.c tests/recorder/cuda/nextlib_old.c
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_TEST_CFLAGS) -fno-optimize-sibling-calls -fPIC -shared -DNEXTLIB_VALUE=1 \
		-o $@ $^ -ldl

$(CUDA_T)/libnext_b.so: tests/recorder/cuda/nextlib.c
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_TEST_CFLAGS) -fPIC -shared -DNEXTLIB_VALUE=2 -o $@ $<

# libnext_a before libnext_b in the link order = lookup order.
$(CUDA_T)/dlsym_app: tests/recorder/cuda/dlsym_app.c $(CUDA_T)/libnext_a.so $(CUDA_T)/libnext_b.so
	$(CC) $(CUDA_TEST_CFLAGS) -o $@ $< -L$(CUDA_T) -Wl,-rpath,'$$ORIGIN' \
		-Wl,--no-as-needed -lnext_a -lnext_b -ldl

$(CUDA_T)/launchbench: tests/recorder/cuda/launchbench.c
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_TEST_CFLAGS) -o $@ $< -ldl
