package history

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The pod spec decodes strictly (no unknown field) into a Kubernetes Pod
// whose worker container holds the figures.
func TestPodSpecDecodes(t *testing.T) {
	f := func(memReq, memLim, cpu int64, image string, wantCPU, wantMem, wantLim, wantImage string) {
		t.Helper()
		var pod corev1.Pod
		if err := yaml.UnmarshalStrict([]byte(PodSpec(memReq, memLim, cpu, image)), &pod); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if pod.Kind != "Pod" || pod.APIVersion != "v1" || len(pod.Spec.Containers) != 1 {
			t.Fatalf("pod %+v", pod)
		}
		c := pod.Spec.Containers[0]
		if c.Name != "worker" || c.Image != wantImage || len(c.Args) != 3 {
			t.Errorf("container %q image %q args %q", c.Name, c.Image, c.Args)
		}
		got := func(l corev1.ResourceList, name corev1.ResourceName) string {
			q, ok := l[name]
			if !ok {
				return ""
			}
			return q.String()
		}
		if g := got(c.Resources.Requests, corev1.ResourceCPU); g != wantCPU {
			t.Errorf("cpu request %q, want %q", g, wantCPU)
		}
		if g := got(c.Resources.Requests, corev1.ResourceMemory); g != wantMem {
			t.Errorf("memory request %q, want %q", g, wantMem)
		}
		if g := got(c.Resources.Limits, corev1.ResourceMemory); g != wantLim {
			t.Errorf("memory limit %q, want %q", g, wantLim)
		}
		if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
			t.Error("a CPU limit")
		}
		if q := c.Resources.Limits[corev1.ResourceMemory]; wantLim != "" && q.Value() != memLim {
			t.Errorf("memory limit %d bytes, want %d", q.Value(), memLim)
		}
	}
	f(484<<20, 484<<20, 960, "ee:1", "960m", "484Mi", "484Mi", "ee:1")
	f(1000, 1000, 0, "", "", "1k", "1k", DefaultEEImage)
	f(0, 0, 250, "", "250m", "", "", DefaultEEImage)
	if s := PodSpec(0, 0, 0, "x"); s != "" {
		t.Errorf("nothing to set: %q", s)
	}
}
