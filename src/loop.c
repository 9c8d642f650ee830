/* loop: not written yet */
