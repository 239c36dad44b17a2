package status

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/workload"
)

// CustomKind is one kind of --reload-resources, and whether courier's
// ServiceAccount may watch it: a kind it may not is not reloaded (and holds
// nothing else up), which only its log and courier_custom_kind_watch_forbidden
// say otherwise.
type CustomKind struct {
	Resource string `json:"resource"`
	// MayWatch: courier may list and watch the kind's CRD and its objects
	// (nil: it could not be told, see Problem).
	MayWatch *bool  `json:"mayWatch"`
	Problem  string `json:"problem,omitempty"`
}

// CheckKinds asks the API server (SubjectAccessReview) whether the
// ServiceAccount sa of the installation in namespace may list and watch
// each kind of resources and its CustomResourceDefinition: the kind's
// objects in every namespace of scope (informers.Scope.Each: each watched
// namespace, or all).
func CheckKinds(ctx context.Context, client kubernetes.Interface, namespace, sa string, resources workload.Resources, scope informers.Scope) []CustomKind {
	user := "system:serviceaccount:" + namespace + ":" + sa
	var out []CustomKind
	for _, r := range resources {
		k := CustomKind{Resource: r.GroupResource.String()}
		may, missing := true, ""
		attrs := []authorizationv1.ResourceAttributes{
			{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: k.Resource, Verb: "list"},
			{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: k.Resource, Verb: "watch"},
		}
		for _, ns := range scope.Each() {
			attrs = append(attrs, authorizationv1.ResourceAttributes{Namespace: ns, Group: r.Group, Resource: r.Resource, Verb: "list"},
				authorizationv1.ResourceAttributes{Namespace: ns, Group: r.Group, Resource: r.Resource, Verb: "watch"})
		}
		for _, a := range attrs {
			review, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}, ResourceAttributes: &a},
			}, metav1.CreateOptions{})
			if err != nil {
				k.Problem = fmt.Sprintf("cannot tell whether %s may watch it: %v", user, err)
				break
			}
			if !review.Status.Allowed && missing == "" {
				may, missing = false, fmt.Sprintf("%s of %s", a.Verb, a.Resource)
				if a.Namespace != "" {
					missing += " in namespace " + a.Namespace
				}
			}
		}
		if k.Problem == "" {
			k.MayWatch = &may
			if !may {
				k.Problem = fmt.Sprintf("%s may not %s: courier does not reload this kind (grant list and watch on it and on its CRD)", user, missing)
			}
		}
		out = append(out, k)
	}
	return out
}
