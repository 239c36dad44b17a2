// Package namespaces holds the one test of whether a namespace is going
// away, from its cached object or from the API server's refusal. Every
// controller and the Event writer ask it; it reads and writes nothing.
package namespaces

import (
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Terminating reports whether ns is being deleted.
func Terminating(ns *corev1.Namespace) bool {
	return ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating
}

// Refused reports whether err is the API server refusing to create an
// object because its namespace is being deleted.
func Refused(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}
