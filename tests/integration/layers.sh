#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The layers as the source includes them (docs/ARCHITECTURE.md, "The library"):
#  - a file includes a private header of its own module only, by a relative path
#    (modules: lib, gpuq with gpuq/cuda, cache, the fs core, fs/graph with its
#    apps, fs/nd, fs/fuse, bin); nothing resolves only through -I.; the one
#    header of the fs core for the object types, fs/fs_type.h (their ops table
#    entries and fsck's view), is for fs/graph and fs/nd too;
#  - public headers of a layer above are not included: gpuq and lib see the I/O
#    core's headers, cache also gstore_cache.h, the fs core also gstore_fs.h, the
#    object types and the front end also gstore_graph.h / gstore_nd.h;
#  - programs in bin/ see public headers, uapi/ and bin/ only.
# Known exceptions, each being removed by its owner, are listed below; one that
# no longer occurs is reported (drop it from the list), never a failure.
set -u
cd "$(dirname "$0")/../.."

# FILE:INCLUDE pairs tolerated for now (and why)
exceptions=(
)

module() {
	case $1 in
	lib/*) echo lib ;;
	gpuq/*) echo gpuq ;;
	cache/*) echo cache ;;
	fs/graph/*) echo fs/graph ;;
	fs/nd/*) echo fs/nd ;;
	fs/fuse/*) echo fs/fuse ;;
	fs/*) echo fs ;;
	bin/*) echo bin ;;
	*) echo "?" ;;
	esac
}

# the highest public layer a module may include (0 I/O core .. 3 object types)
mod_rank() {
	case $1 in
	lib | gpuq) echo 0 ;;
	cache) echo 1 ;;
	fs) echo 2 ;;
	*) echo 3 ;;
	esac
}
pub_rank() {
	case $1 in
	gstore_cache.h) echo 1 ;;
	gstore_fs.h) echo 2 ;;
	gstore_graph.h | gstore_nd.h) echo 3 ;;
	gstore_cuda*.h) echo cuda ;;
	*) echo 0 ;;
	esac
}

fails=0 used=()
violation() {
	local key=$1:$2 e
	for e in "${exceptions[@]}"; do
		if [[ $e == "$key" ]]; then
			used+=("$e")
			return
		fi
	done
	echo "FAIL: $1 includes \"$2\": $3"
	fails=$((fails + 1))
}

while read -r f; do
	m=$(module "$f")
	d=$(dirname "$f")
	while read -r inc; do
		if [[ -e $d/$inc ]]; then
			t=$(realpath --relative-to=. "$d/$inc")
			tm=$(module "$t")
			[[ $tm == "$m" ]] ||
				[[ $t == fs/fs_type.h && ($m == fs/graph || $m == fs/nd) ]] ||
				violation "$f" "$inc" "a private header of $tm"
		elif [[ -e include/$inc ]]; then
			r=$(pub_rank "$inc")
			if [[ $r == cuda ]]; then
				[[ $f == gpuq/cuda/* || $f == fs/graph/cuda/* ]] ||
					violation "$f" "$inc" "the CUDA API, for gpuq/cuda and fs/graph/cuda only"
			elif [[ $m != bin && $r -gt $(mod_rank "$m") ]]; then
				violation "$f" "$inc" "a public header of a layer above $m"
			fi
		elif [[ -e uapi/$inc ]]; then
			:
		elif [[ $f == bin/gstorefs.c && $inc == gstorefs.h ]]; then
			:	# the front end's entry points: -Ifs/fuse for gstorefs alone
		elif [[ -e lib/$inc && $m != bin ]]; then
			:
		else
			violation "$f" "$inc" "found only through -I. or another module's path"
		fi
	done < <(sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\([^"]*\)".*/\1/p' "$f")
done < <(find lib gpuq cache fs bin \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) |
	 sort)

for e in "${exceptions[@]}"; do
	[[ " ${used[*]} " == *" $e "* ]] || echo "note: exception $e no longer occurs: drop it"
done
[[ $fails -eq 0 ]] || exit 1
echo "PASS: includes follow the layers (${#used[@]} known exceptions)"
