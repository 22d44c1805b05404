# Keyway — build, test and install. `make help` lists the targets.
SWIFT ?= swift
SHELL := /bin/bash
APT_PACKAGES := libsodium-dev libsqlite3-dev libpam0g-dev sqlite3 pamtester libpam-wrapper sudo passwd gcc make

PREFIX ?= /usr/local
PAM_DIR ?= $(shell dpkg-architecture -qDEB_HOST_MULTIARCH >/dev/null 2>&1 && echo /lib/$$(dpkg-architecture -qDEB_HOST_MULTIARCH)/security || echo /lib/security)

.PHONY: help deps build module cli harness test demo install uninstall bench clean

help:
	@echo "make demo       install deps, build, enroll a throwaway user, authenticate through real PAM (no system file changed)"
	@echo "make test       install deps, build, and run every test"
	@echo "make module     build/pam_keyway.so, the deployable PAM module (release, static Swift runtime)"
	@echo "make cli        build/keyway, the command line"
	@echo "make install    install the module, the CLI, man pages, /etc/keyway and /var/lib/keyway"
	@echo "make uninstall  remove what make install installed (the store is kept)"
	@echo "make bench      print the benchmark figures (PAM module, store, Argon2id)"

# Installs only what is missing, so repeated runs stay fast and offline-friendly.
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

# The deployable module: release, no SwiftPM rpath (the runtime is static), copied under its PAM name.
module: deps
	$(SWIFT) build -c release --product pam_keyway --disable-local-rpath
	@mkdir -p build
	cp .build/release/libpam_keyway.so build/pam_keyway.so

cli: deps
	$(SWIFT) build -c release --product keyway --disable-local-rpath --static-swift-stdlib
	@mkdir -p build
	cp .build/release/keyway build/keyway

# A C host over the real libpam, for the PAM tests and the benchmark.
harness: pam/tests/harness.c
	@mkdir -p build
	$(CC) -O2 -Wall -Wextra -o build/pam-harness pam/tests/harness.c -lpam -ldl

test: deps module cli harness
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --parallel 2>&1 | tee .build/test-output.txt | grep -vE '^(◇|\[[0-9]+/[0-9]+\]|Test Case .* started)'; \
	status=$${PIPESTATUS[0]}; exit $$status

clean:
	$(SWIFT) package clean
