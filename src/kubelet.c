/* kubelet: not written yet */
