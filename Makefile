# SPDX-License-Identifier: MIT
# gstore top-level build.  `make help` lists the targets.
#
#   make            build libgstore, the tools and the tests (and .cu files if nvcc exists)
#   make check      install the test packages, build, run every test in parallel
#                   (tests/run.sh; exit 77 = skip; TEST_JOBS=N)
#   make asan check the same under ASan/UBSan (build-asan/)
#   make tsan check-tsan   the ring and cache tests under TSan (build-tsan/)
#   make deps       install the missing Debian packages the demo needs (scripts/deps.sh)
#   make demo       the same, build what the demo uses, format an image, import example
#                   data, mount it, show it (CUDA=1: the .cu files too)
#   make bench      run the benchmarks (see docs/PERF.md)
#   make install    libgstore (.so, .a), headers, gstore.pc, the CUDA library where nvcc
#                   exists, binaries, man pages, mount helper under $(DESTDIR)$(PREFIX)

PREFIX ?= /usr/local
DESTDIR ?=
CC ?= cc
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
WERROR ?= -Werror

SAN :=
ifneq ($(filter asan,$(MAKECMDGOALS)),)
SAN := asan
endif
ifneq ($(filter tsan check-tsan,$(MAKECMDGOALS)),)
SAN := tsan
endif

ifeq ($(SAN),asan)
B ?= build-asan
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
else ifeq ($(SAN),tsan)
B ?= build-tsan
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
else
B ?= build
SANFLAGS :=
endif

# Include paths by audience.  Every file sees the public headers (include/) and
# the uapi; library code also lib/ (logging, crc32c), and reaches its own
# module's private header by a relative path: no -I. that would let any file
# include any other module's internals.  Tests and benchmarks may reach
# internals on purpose (TEST_CPPFLAGS); only the FUSE front end and gstorefs
# see fuse3.
CPPFLAGS += -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Iinclude -Iuapi
LIB_CPPFLAGS := -Ilib
TEST_CPPFLAGS := -Ilib -I.
# (expanded when used: `make demo` and `make check` install libfuse3-dev first)
FUSE_CPPFLAGS = $(shell pkg-config --cflags fuse3 2>/dev/null)
CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 -Wall -Wextra $(WERROR) -Wno-unused-parameter -pthread -MMD -MP $(SANFLAGS)
# library objects (static and shared alike): position independent, and hidden
# unless a public header declares them (#pragma GCC visibility in include/)
LIB_CFLAGS := -fPIC -fvisibility=hidden
LDFLAGS += -pthread $(SANFLAGS)
LDLIBS += -luring -lm
TEST_LDLIBS := -lcmocka

VERSION := 0.1.0
SOVERSION := 0
PREFIX_LIB ?= lib
LIBDIR ?= $(PREFIX)/$(PREFIX_LIB)
INCLUDEDIR ?= $(PREFIX)/include

# libgstore: every .c of the library layers (fs core, object types, cache, I/O core)
LIB_SRCS := $(sort $(wildcard lib/*.c gpuq/*.c cache/*.c fs/*.c fs/graph/*.c fs/graph/apps/*.c \
			     fs/nd/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/%.o)
LIB := $(B)/libgstore.a
# the shared one: soname libgstore.so.0, exports only what lib/libgstore.map lets out (gs_*)
SO_NAME := libgstore.so.$(SOVERSION)
SO_FILE := libgstore.so.$(VERSION)
SO := $(B)/$(SO_FILE)
SO_LINKS := $(B)/$(SO_NAME) $(B)/libgstore.so
SO_MAP := lib/libgstore.map
# the FUSE front end (fs/fuse/) is the daemon's, not the library's: only gstorefs links it
FUSE_SRCS := $(sort $(wildcard fs/fuse/*.c))
FUSE_OBJS := $(FUSE_SRCS:%.c=$(B)/%.o)
FUSE_LIB := $(B)/libgstorefs.a

# programs: bin/NAME.c or bin/NAME/*.c -> $(B)/bin/NAME
PROG_SINGLE := $(patsubst bin/%.c,%,$(wildcard bin/*.c))
PROG_DIRS := $(patsubst bin/%/,%,$(sort $(dir $(wildcard bin/*/*.c))))
PROGS := $(addprefix $(B)/bin/,$(PROG_SINGLE) $(PROG_DIRS))

# tests: cmocka units tests/unit/MOD/test_*.c, C integration programs tests/*/t_*.c
UNIT_SRCS := $(wildcard tests/unit/*/test_*.c)
UNIT_BINS := $(UNIT_SRCS:%.c=$(B)/%)
ITEST_SRCS := $(wildcard tests/integration/t_*.c tests/helpers/*.c)
ITEST_BINS := $(ITEST_SRCS:%.c=$(B)/%)

# CUDA: every .cu compiles (sm_90) wherever nvcc exists, GPU or not; the library's
# (gpuq/cuda/*.cu) also form libgstore_cuda.a, linked by CUDA programs with -lgstore
CU_SRCS := $(shell find . -name '*.cu' -not -path './build*' -not -path './.*' 2>/dev/null)
CU_OBJS := $(CU_SRCS:./%.cu=$(B)/cuda/%.o)
CU_LIB_OBJS := $(patsubst %.cu,$(B)/cuda/%.o,$(sort $(wildcard gpuq/cuda/*.cu fs/graph/cuda/*.cu)))
CUDA_LIB := $(B)/libgstore_cuda.a
# and libgstore_cuda.so (for ctypes: python/gstore): the same objects, the CUDA runtime
# linked in statically, needing libgstore.so.0, exporting only the gs_* of public headers
CUDA_SO_NAME := libgstore_cuda.so.$(SOVERSION)
CUDA_SO_FILE := libgstore_cuda.so.$(VERSION)
CUDA_SO := $(B)/$(CUDA_SO_FILE)
CUDA_SO_LINKS := $(B)/$(CUDA_SO_NAME) $(B)/libgstore_cuda.so
NVFLAGS := -arch=sm_90 -std=c++17 -Iinclude -Iuapi -Xcompiler -Wall,-fPIC
ifneq ($(NVCC),)
ALL_CU := $(CU_OBJS) $(CUDA_LIB) $(CUDA_SO_LINKS)
endif

.PHONY: all check asan tsan check-tsan deps deps-test demo bench install clean help cuda lib progs tests kmod
all: $(LIB) $(SO_LINKS) $(PROGS) $(UNIT_BINS) $(ITEST_BINS) $(ALL_CU)
lib: $(LIB) $(SO_LINKS)
progs: $(PROGS)
tests: $(UNIT_BINS) $(ITEST_BINS)
cuda: $(CU_OBJS) $(CUDA_LIB) $(CUDA_SO_LINKS)

# a change of compiler or flags rebuilds every object (make tracks files, not flags);
# `make demo` and `make check` install their packages first (see deps: below)
PKGS := $(if $(filter check,$(MAKECMDGOALS)),deps-test,$(if $(filter demo,$(MAKECMDGOALS)),deps))
FLAGS_STAMP := $(B)/.flags
FLAGS_NOW := $(CC) $(CPPFLAGS) $(LIB_CPPFLAGS) $(TEST_CPPFLAGS) $(CFLAGS) $(LIB_CFLAGS)
$(FLAGS_STAMP): FORCE | $(PKGS)
	@mkdir -p $(@D)
	@echo '$(FLAGS_NOW)' | cmp -s - $@ || echo '$(FLAGS_NOW)' >$@
.PHONY: FORCE

# library objects
$(B)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(LIB_CPPFLAGS) $(CFLAGS) $(LIB_CFLAGS) -c -o $@ $<

$(FUSE_OBJS): LIB_CPPFLAGS += $(FUSE_CPPFLAGS)

$(LIB): $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

$(SO): $(LIB_OBJS) $(SO_MAP)
	$(CC) -shared -Wl,-soname,$(SO_NAME) -Wl,--version-script=$(SO_MAP) -Wl,--no-undefined \
		$(LDFLAGS) -o $@ $(LIB_OBJS) $(LDLIBS)

$(SO_LINKS): $(SO)
	ln -sf $(SO_FILE) $(B)/$(SO_NAME)
	ln -sf $(SO_NAME) $(B)/libgstore.so

$(FUSE_LIB): $(FUSE_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

# programs: public headers only (gstorefs also the front end's gstorefs.h)
$(B)/bin/%.o: bin/%.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(B)/bin/gstorefs.o: CPPFLAGS += -Ifs/fuse $(FUSE_CPPFLAGS)

$(B)/bin/gstorefs: $(B)/bin/gstorefs.o $(FUSE_LIB) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(FUSE_LIB) $(LIB) $(LDLIBS) -lfuse3

$(B)/bin/%: $(B)/bin/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# objects of bin/NAME/*.c live under $(B)/o/: $(B)/bin/NAME is the program itself
$(B)/o/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

define prog_dir_rule
$(B)/bin/$(1): $(patsubst %.c,$(B)/o/%.o,$(wildcard bin/$(1)/*.c)) $(LIB)
	@mkdir -p $$(@D)
	$$(CC) $$(LDFLAGS) -o $$@ $$(filter %.o,$$^) $(LIB) $$(LDLIBS)
endef
$(foreach p,$(PROG_DIRS),$(eval $(call prog_dir_rule,$(p))))

# tests reach internals (they link the static library, and may include a .c)
$(B)/tests/%.o: tests/%.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(TEST_CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(B)/tests/%: $(B)/tests/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS) $(TEST_LDLIBS)

# hidden unless a public header says otherwise, as the C library's objects
$(B)/cuda/gpuq/cuda/%.o: gpuq/cuda/%.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -Xcompiler -fvisibility=hidden $(LIB_CPPFLAGS) -c -o $@ $<

# the io_uring transport of the front end (fs/fuse/uring.c): its test sees libfuse too
$(B)/tests/unit/fuse/%.o: TEST_CPPFLAGS += $(FUSE_CPPFLAGS)
$(B)/tests/unit/fuse/%: $(B)/tests/unit/fuse/%.o $(FUSE_LIB) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(FUSE_LIB) $(LIB) $(LDLIBS) -lfuse3 $(TEST_LDLIBS)

# the attach server is the daemon's (fs/fuse/attach_srv.c): its tests link the front end's library
$(B)/tests/unit/attach/%: $(B)/tests/unit/attach/%.o $(FUSE_LIB) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(FUSE_LIB) $(LIB) $(LDLIBS) $(TEST_LDLIBS)

$(B)/cuda/%.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) $(TEST_CPPFLAGS) -c -o $@ $<

$(CUDA_LIB): $(CU_LIB_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

$(CUDA_SO): $(CU_LIB_OBJS) $(SO_LINKS) $(SO_MAP)
	$(NVCC) -shared -Xlinker -soname,$(CUDA_SO_NAME) -Xlinker --version-script=$(SO_MAP) \
		-Xlinker --no-undefined -o $@ $(CU_LIB_OBJS) -L$(B) -lgstore -luring

$(CUDA_SO_LINKS): $(CUDA_SO)
	ln -sf $(CUDA_SO_FILE) $(B)/$(CUDA_SO_NAME)
	ln -sf $(CUDA_SO_NAME) $(B)/libgstore_cuda.so

# tools named as helpers: mkfs.gstore / fsck.gstore are links to gstore
links: $(PROGS)
	@if [ -x $(B)/bin/gstore ]; then ln -sf gstore $(B)/bin/mkfs.gstore; \
		ln -sf gstore $(B)/bin/fsck.gstore; fi
all: links

check: deps-test all
	B=$(B) tests/run.sh

asan:
	@:
tsan:
	@:
# TSan covers the lock-free and concurrent core: only those tests are built
TSAN_TESTS ?= unit/gpuq unit/cache unit/nvme unit/fs/test_concurrent unit/fs/test_lease
TSAN_BINS := $(filter $(addprefix $(B)/tests/,$(TSAN_TESTS) $(addsuffix /%,$(TSAN_TESTS))),$(UNIT_BINS))
check-tsan: $(TSAN_BINS)
	B=$(B) TESTS_FILTER='$(TSAN_TESTS)' tests/run.sh

# Packages before anything compiles (every object waits for $(FLAGS_STAMP), PKGS): the demo
# set for `make deps` and `make demo`, the test set (cmocka, fio, stress-ng, qemu, ...)
# for `make check`, best effort there (without root or network the tests that need a
# missing package skip; DEPS_STRICT=1 makes it an error, as CI wants).
deps:
	scripts/deps.sh demo
deps-test:
	DEPS_TRY=$(if $(DEPS_STRICT),0,1) scripts/deps.sh test

# The demo builds what it runs: libgstore, gstore, gstorefs; the .cu files with CUDA=1,
# or when $(B)/cuda exists already (CUDA=0: never).
DEMO_CU := $(if $(filter 1,$(CUDA)),$(ALL_CU),$(if $(filter 0,$(CUDA)),,$(if \
	   $(wildcard $(B)/cuda),$(ALL_CU))))
demo: $(B)/bin/gstore $(B)/bin/gstorefs $(DEMO_CU) | deps
	scripts/demo.sh

bench: all
	bench/run-all.sh

kmod:
	$(MAKE) -C kmod

# pkg-config files: paths relative to ${prefix} where they lie under it, so that
# PKG_CONFIG_SYSROOT_DIR finds a DESTDIR copy
PC_SED := -e 's|@PREFIX@|$(PREFIX)|' \
	  -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|' \
	  -e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|' \
	  -e 's|@VERSION@|$(VERSION)|'

# what it installs, not the tests (no cmocka needed to install)
install: lib progs links $(if $(NVCC),$(CUDA_LIB) $(CUDA_SO_LINKS))
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)
	install -m 755 $(SO) $(DESTDIR)$(LIBDIR)/
	ln -sf $(SO_FILE) $(DESTDIR)$(LIBDIR)/$(SO_NAME)
	ln -sf $(SO_NAME) $(DESTDIR)$(LIBDIR)/libgstore.so
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/
	install -m 644 include/gstore*.h $(DESTDIR)$(INCLUDEDIR)/
	sed $(PC_SED) lib/gstore.pc.in >$(DESTDIR)$(LIBDIR)/pkgconfig/gstore.pc
	if [ -n "$(NVCC)" ]; then \
		install -m 644 $(CUDA_LIB) $(DESTDIR)$(LIBDIR)/ && \
		install -m 755 $(CUDA_SO) $(DESTDIR)$(LIBDIR)/ && \
		ln -sf $(CUDA_SO_FILE) $(DESTDIR)$(LIBDIR)/$(CUDA_SO_NAME) && \
		ln -sf $(CUDA_SO_NAME) $(DESTDIR)$(LIBDIR)/libgstore_cuda.so && \
		sed $(PC_SED) lib/gstore-cuda.pc.in >$(DESTDIR)$(LIBDIR)/pkgconfig/gstore-cuda.pc; \
	fi
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/share/man
	for p in $(PROGS); do install -m 755 $$p $(DESTDIR)$(PREFIX)/bin/; done
	ln -sf $(PREFIX)/bin/gstore $(DESTDIR)$(PREFIX)/sbin/mkfs.gstore
	ln -sf $(PREFIX)/bin/gstore $(DESTDIR)$(PREFIX)/sbin/fsck.gstore
	-ln -sf $(PREFIX)/bin/gstorefs $(DESTDIR)$(PREFIX)/sbin/mount.gstorefs
	for s in 1 3 4 5 7 8; do \
		install -d $(DESTDIR)$(PREFIX)/share/man/man$$s; \
		for m in man/man$$s/*.$$s; do [ -e "$$m" ] && install -m 644 $$m $(DESTDIR)$(PREFIX)/share/man/man$$s/; done; \
	done; true

clean:
	rm -rf build build-asan build-tsan
	-$(MAKE) -C kmod clean 2>/dev/null

help:
	@sed -n '2,13p' Makefile

-include $(shell find $(B) -name '*.d' 2>/dev/null)
.SECONDARY:
