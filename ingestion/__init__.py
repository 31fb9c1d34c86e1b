"""The ingestion floor: tf.data pipelines, their measurement and the tf.data service.

Every module that imports TensorFlow lives in this package (or imports it first), so this file
imports ``triton``, where it is installed, before any of them loads TensorFlow
(``core.tf_compat``: the other order crashes the process).
"""

from core.tf_compat import import_triton_before_tensorflow

import_triton_before_tensorflow()
