# assets.sh, sourced by scripts/v2vm/run.sh: the pinned kernels and the
# guest root file system, fetched and built once into $CACHE and kept there,
# keyed by the pinned versions.

# The kernels the VM boots: Debian's linux-image packages, pinned to the
# package version. 6.1 (bookworm's own) cannot reset memory.peak, 6.12
# (bookworm-security/backports) can, per open file. Security updates replace
# these packages in the archive: when a pinned one is gone, pick its
# successor with
#   apt-cache search '^linux-image-6\.(1\.0|12)\.[0-9.+a-z-]*-amd64$'
#   apt-cache policy linux-image-<abi>-amd64
# and change the line here.
KERNELS=(
	"linux-image-6.1.0-57-amd64=6.1.192-3"
	"linux-image-6.12.117+deb12-amd64=6.12.117-1~deb12u1"
)

# The guest's Debian release and the packages installed on top of
# debootstrap's minbase: what `ansible-runner run` needs.
ROOTFS_SUITE=bookworm
ROOTFS_PACKAGES="python3 ansible-core python3-ansible-runner"
ROOTFS_SIZE=1200M

die() {
	echo "v2vm: $*" >&2
	exit 1
}

# fetch_kernel PKG=VERSION: extracts the package into $CACHE/kernel-PKG_VERSION
# (boot/vmlinuz-*, lib/modules/*) unless already there; prints the dir.
fetch_kernel() {
	local pin=$1 pkg=${1%%=*} ver=${1#*=}
	local dir=$CACHE/kernel-$pkg-$ver
	if [[ ! -f $dir/.done ]]; then
		if ! apt-cache show "$pkg=$ver" >/dev/null 2>&1; then
			apt-get update >&2 || die "apt-get update"
		fi
		if ! apt-cache show "$pkg=$ver" >/dev/null 2>&1; then
			die "pinned kernel $pkg version $ver is not in the apt archive any more (apt-get update done?). Pick its successor (apt-cache search '^linux-image-'; apt-cache policy) and change KERNELS in scripts/v2vm/assets.sh"
		fi
		rm -rf "$dir" "$dir.tmp"
		mkdir -p "$dir.tmp"
		(cd "$dir.tmp" && apt-get -o APT::Sandbox::User=root download "$pin" >&2) || die "apt-get download $pin"
		dpkg-deb -x "$dir.tmp"/*.deb "$dir.tmp/x" || die "dpkg-deb -x $pkg"
		mv "$dir.tmp/x" "$dir"
		rm -rf "$dir.tmp"
		touch "$dir/.done"
	fi
	echo "$dir"
}

# build_rootfs: a debootstrap minbase of $ROOTFS_SUITE with $ROOTFS_PACKAGES
# (Ansible's big collections removed: the guest runs only ansible.builtin),
# as an ext4 image made with mke2fs -d (no loop mount). Prints the image.
build_rootfs() {
	local key
	key=$(echo "$ROOTFS_SUITE $ROOTFS_PACKAGES $ROOTFS_SIZE" | sha256sum | cut -c1-12)
	local dir=$CACHE/rootfs-$ROOTFS_SUITE-$key
	if [[ ! -f $dir/.done ]]; then
		umount "$dir/tree/proc" 2>/dev/null || true
		rm -rf --one-file-system "$dir"
		mkdir -p "$dir"
		local root=$dir/tree
		echo "v2vm: debootstrap $ROOTFS_SUITE into $root" >&2
		debootstrap --variant=minbase "$ROOTFS_SUITE" "$root" >"$dir/debootstrap.log" 2>&1 ||
			die "debootstrap failed: see $dir/debootstrap.log"
		mount -t proc proc "$root/proc"
		trap "umount '$root/proc' 2>/dev/null" EXIT
		local rc=0
		# shellcheck disable=SC2086
		chroot "$root" env DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 \
			apt-get install -y --no-install-recommends $ROOTFS_PACKAGES >"$dir/install.log" 2>&1 || rc=$?
		umount "$root/proc"
		trap - EXIT
		((rc == 0)) || die "apt-get install in the rootfs failed: see $dir/install.log"
		chroot "$root" apt-get clean
		rm -rf "$root"/usr/lib/python3/dist-packages/ansible_collections \
			"$root"/var/lib/apt/lists/* "$root"/usr/share/doc "$root"/usr/share/man
		mkdir -p "$root/mnt/share" "$root/mnt/src"
		# mke2fs prints "Creating regular file" on stdout, which is this
		# function's answer: its output goes to stderr.
		mke2fs -q -t ext4 -O ^metadata_csum -d "$root" "$dir/root.img" "$ROOTFS_SIZE" >&2 ||
			die "mke2fs of $root"
		rm -rf --one-file-system "$root"
		touch "$dir/.done"
	fi
	echo "$dir/root.img"
}

# The guest's modules, loaded by /init in this order after their
# dependencies (each module's depends=); built-in ones are skipped.
GUEST_MODULES="virtio_pci virtio_blk crc32c_generic ext4 9pnet_virtio 9p"

# modcat FILE: a module's bytes (6.12's are xz-compressed, 6.1's not).
modcat() {
	case $1 in
	*.xz) xz -dc "$1" ;;
	*) cat "$1" ;;
	esac
}

# modules_in KERNELDIR: the .ko or .ko.xz paths of $GUEST_MODULES and what they
# depend on, dependencies first, relative to the kernel's modules dir.
modules_in() {
	local kdir=$1 mdir
	mdir=$(echo "$kdir"/lib/modules/*)
	declare -A seen=()
	local order=()
	visit() {
		local m=$1 f dep
		m=${m//-/_}
		[[ -n ${seen[$m]:-} ]] && return
		seen[$m]=1
		f=$(find "$mdir/kernel" \( -name "$m.ko" -o -name "$m.ko.xz" -o -name "${m//_/-}.ko" -o -name "${m//_/-}.ko.xz" \) | head -1)
		if [[ -z $f ]]; then
			grep -qE "/(${m}|${m//_/-})\.ko$" "$mdir/modules.builtin" ||
				die "module $m is neither in $mdir nor built in"
			return
		fi
		for dep in $(modcat "$f" | tr '\0' '\n' | grep -a "^depends=" | head -1 | cut -d= -f2 | tr , ' '); do
			visit "$dep"
		done
		order+=("${f#"$mdir"/}")
	}
	local m
	for m in $GUEST_MODULES; do
		visit "$m"
	done
	printf '%s\n' "${order[@]}"
}

# build_initramfs KERNELDIR OUT: a busybox initramfs with the guest's
# modules (uncompressed) and scripts/v2vm/init.
build_initramfs() {
	local kdir=$1 out=$2 mdir tmp
	mdir=$(echo "$kdir"/lib/modules/*)
	tmp=$(mktemp -d)
	mkdir -p "$tmp"/{bin,dev,proc,sys,newroot,modules}
	cp /bin/busybox "$tmp/bin/busybox"
	for a in sh mount umount mkdir insmod chroot poweroff ip cat echo sleep; do
		ln -s busybox "$tmp/bin/$a"
	done
	local i=0 rel
	modules_in "$kdir" >"$tmp/list"
	while read -r rel; do
		i=$((i + 1))
		modcat "$mdir/$rel" >"$tmp/modules/$(printf %02d $i)-$(basename "$rel" .xz)"
	done <"$tmp/list"
	rm "$tmp/list"
	cp "$HERE/init" "$tmp/init"
	chmod 755 "$tmp/init"
	(cd "$tmp" && find . | cpio -o -H newc --quiet | gzip -1) >"$out"
	rm -rf "$tmp"
}
