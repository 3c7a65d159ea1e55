package history

import (
	"strconv"

	"go.yaml.in/yaml/v3"
)

// DefaultEEImage is the image of AWX's default pod spec, written when no
// run named its execution environment (AWX sets the job's EE image on
// the worker container anyway).
const DefaultEEImage = "quay.io/ansible/awx-ee:latest"

// The pod spec as AWX's container groups take it (pod_spec_override):
// AWX replaces the top-level keys of its default pod with those of the
// override and then sets the job's image and args on the first
// container, so the spec is written whole, with the worker container
// first, as AWX's default has it.
type podSpec struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Spec       podBody `yaml:"spec"`
}

type podBody struct {
	ServiceAccountName           string         `yaml:"serviceAccountName"`
	AutomountServiceAccountToken bool           `yaml:"automountServiceAccountToken"`
	Containers                   []podContainer `yaml:"containers"`
}

type podContainer struct {
	Image     string       `yaml:"image"`
	Name      string       `yaml:"name"`
	Args      []string     `yaml:"args"`
	Resources podResources `yaml:"resources"`
}

type podResources struct {
	Requests map[string]string `yaml:"requests,omitempty"`
	Limits   map[string]string `yaml:"limits,omitempty"`
}

// PodSpec returns the pod_spec_override YAML of a container group whose
// worker container requests memRequestBytes and cpuMillicores and is
// limited to memLimitBytes (0: that figure left out; no CPU limit),
// running image ("": DefaultEEImage). It returns "" when every figure is
// 0. Memory is written in Mi when it is whole MiB.
func PodSpec(memRequestBytes, memLimitBytes, cpuMillicores int64, image string) string {
	if memRequestBytes <= 0 && memLimitBytes <= 0 && cpuMillicores <= 0 {
		return ""
	}
	if image == "" {
		image = DefaultEEImage
	}
	res := podResources{Requests: map[string]string{}, Limits: map[string]string{}}
	if cpuMillicores > 0 {
		res.Requests["cpu"] = strconv.FormatInt(cpuMillicores, 10) + "m"
	}
	if memRequestBytes > 0 {
		res.Requests["memory"] = quantityBytes(memRequestBytes)
	}
	if memLimitBytes > 0 {
		res.Limits["memory"] = quantityBytes(memLimitBytes)
	}
	p := podSpec{APIVersion: "v1", Kind: "Pod", Spec: podBody{
		ServiceAccountName: "default",
		Containers: []podContainer{{
			Image: image, Name: "worker",
			Args:      []string{"ansible-runner", "worker", "--private-data-dir=/runner"},
			Resources: res,
		}},
	}}
	out, err := yaml.Marshal(p)
	if err != nil {
		panic(err) // plain structs of strings always encode
	}
	return string(out)
}

// quantityBytes writes bytes as a Kubernetes quantity: NMi when whole
// MiB, else plain bytes.
func quantityBytes(b int64) string {
	if b%(1<<20) == 0 {
		return strconv.FormatInt(b>>20, 10) + "Mi"
	}
	return strconv.FormatInt(b, 10)
}
