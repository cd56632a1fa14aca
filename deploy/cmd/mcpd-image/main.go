// Command mcpd-image builds mcpd's container image from a static mcpd
// binary, with no container engine and no registry, and writes it as an
// OCI image layout and/or a tarball for docker load or podman load. `make
// image` runs it; see docs/deployment.md.
//
//	mcpd-image -binary bin/image/mcpd -version v1.2.3 \
//	    -oci-layout bin/image/oci -tarball bin/image/mcpd.tar
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/mcpd-project/mcpd/deploy/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mcpd-image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("mcpd-image", flag.ContinueOnError)
	var o image.Options
	var layoutDir, tarPath, tag, created string
	fs.StringVar(&o.Binary, "binary", "", "mcpd built for Linux with CGO_ENABLED=0")
	fs.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "PEM CA bundle to install in the image; empty leaves it out")
	fs.StringVar(&o.Version, "version", "", "the release, as the binary's --version prints it (label org.opencontainers.image.version)")
	fs.StringVar(&o.Revision, "revision", "", "the VCS revision (label org.opencontainers.image.revision)")
	fs.StringVar(&o.Source, "source", "https://github.com/mcpd-project/mcpd", "the repository URL (labels org.opencontainers.image.source and .url)")
	fs.StringVar(&created, "created", os.Getenv("SOURCE_DATE_EPOCH"), "build time in Unix seconds, for the config and every file (default $SOURCE_DATE_EPOCH, else 0): the same inputs give the same digest")
	fs.StringVar(&layoutDir, "oci-layout", "", "write an OCI image layout to this directory (replaced if it exists)")
	fs.StringVar(&tarPath, "tarball", "", "write a docker load / podman load tarball to this file")
	fs.StringVar(&tag, "tag", "", "the image's name in the tarball (default mcpd:VERSION); its tag names the image in the layout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.Binary == "" || (layoutDir == "" && tarPath == "") {
		return errors.New("want -binary and at least one of -oci-layout and -tarball")
	}
	if created != "" {
		secs, err := strconv.ParseInt(created, 10, 64)
		if err != nil {
			return fmt.Errorf("-created %q: want Unix seconds", created)
		}
		o.Created = time.Unix(secs, 0)
	} else {
		o.Created = time.Unix(0, 0)
	}
	if tag == "" {
		tag = "mcpd:" + o.Version
	}
	img, err := image.Build(o)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("-tag %q: %w", tag, err)
	}
	if layoutDir != "" {
		if err := image.WriteLayout(layoutDir, img, ref.TagStr()); err != nil {
			return err
		}
	}
	if tarPath != "" {
		if err := image.WriteTarball(tarPath, img, tag); err != nil {
			return err
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("mcpd-image: %s %s", tag, digest)
	if layoutDir != "" {
		fmt.Printf(" oci:%s:%s", layoutDir, ref.TagStr())
	}
	if tarPath != "" {
		fmt.Printf(" %s", tarPath)
	}
	fmt.Println()
	return nil
}
