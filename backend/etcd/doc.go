// Package etcd is simba's etcd backend.
package etcd
